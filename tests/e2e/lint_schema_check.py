#!/usr/bin/env python3
"""lint_schema_check.py SCHEMA DOC.json... - validate fsdpscope's JSON output
against docs/report-schema.json.

Uses the jsonschema package when it is installed (Debian: python3-jsonschema)
and always also runs the small validator below, which implements the subset
of JSON Schema 2020-12 the fsdpscope schema uses ($ref to #/$defs, type,
enum, const, pattern, minimum, maximum, required, properties, additionalProperties,
items, oneOf), plus one keyword of its own: "x-count": {"key": K, "max": M}
on an array property says its length is min(K's value in the same object,
M), the list holding the first M of a count given beside it (jsonschema
ignores the keyword). Every document is first parsed strictly: a duplicate
key in an object, NaN or Infinity, or text after the document is a
violation.
Exits 1 with every violation listed when a document fails, 2 on bad usage.

strict_loads() and problems() are also what tests/e2e/accuracy_test.py runs
on every JSON document of the accuracy matrix.
"""
import json
import re
import sys


def _no_duplicates(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError("duplicate key %r in an object" % k)
        obj[k] = v
    return obj


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def strict_loads(text):
    """Parse one JSON document strictly (RFC 8259): ValueError on a duplicate
    key, NaN / Infinity, or anything after the document."""
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError("only local $ref are supported: " + ref)
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def check(root, schema, value, path, errors):
    """Append to errors every violation of schema by value at path."""
    if "$ref" in schema:
        check(root, resolve(root, schema["$ref"]), value, path, errors)
    if "oneOf" in schema:
        passing, closest = 0, None
        for sub in schema["oneOf"]:
            sub_errors = []
            check(root, sub, value, path, sub_errors)
            passing += not sub_errors
            if sub_errors and (closest is None or len(sub_errors) < len(closest)):
                closest = sub_errors
        if passing != 1:
            errors.append("%s: matches %d of the oneOf alternatives, not exactly 1" % (path, passing))
            errors.extend(closest or [])  # what the nearest alternative says is wrong
        return
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            errors.append("%s: %r is not of type %s" % (path, value, "/".join(types)))
            return
    if "const" in schema and value != schema["const"]:
        errors.append("%s: %r is not %r" % (path, value, schema["const"]))
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %r is not one of %r" % (path, value, schema["enum"]))
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append("%s: %r does not match %s" % (path, value, schema["pattern"]))
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        errors.append("%s: %r is below %r" % (path, value, schema["minimum"]))
    if "maximum" in schema and TYPES["number"](value) and value > schema["maximum"]:
        errors.append("%s: %r is above %r" % (path, value, schema["maximum"]))
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: required key %r missing" % (path, key))
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, sub in value.items():
            if key in props:
                check(root, props[key], sub, path + "." + key, errors)
            elif extra is False:
                errors.append("%s: key %r is not in the schema" % (path, key))
            elif isinstance(extra, dict):
                check(root, extra, sub, path + "." + key, errors)
        for key, sub in props.items():
            count = sub.get("x-count")
            if count and isinstance(value.get(key), list) and isinstance(value.get(count["key"]), int):
                want = min(value[count["key"]], count["max"])
                if len(value[key]) != want:
                    errors.append("%s.%s: %d items, but %s is %d (at most %d listed): expected %d" % (
                        path, key, len(value[key]), count["key"], value[count["key"]], count["max"], want))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(root, schema["items"], item, "%s[%d]" % (path, i), errors)


def problems(schema, doc, jsonschema=None):
    """Every violation of schema by doc: the built-in validator's, and the
    jsonschema package's when it is given."""
    errors = []
    check(schema, schema, doc, "$", errors)
    if jsonschema is not None:
        validator = jsonschema.Draft202012Validator(schema)
        errors += ["jsonschema: %s: %s" % ("/".join(map(str, e.absolute_path)) or "$", e.message)
                   for e in validator.iter_errors(doc)]
    return errors


def version():
    try:
        from importlib.metadata import version as v
        return v("jsonschema")
    except Exception:  # an old or vendored install without metadata
        return "(unknown version)"


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        schema = json.load(f)
    try:
        import jsonschema  # python3-jsonschema
    except ImportError:
        jsonschema = None
    failed = 0
    for doc_path in argv[2:]:
        with open(doc_path) as f:
            text = f.read()
        try:
            doc = strict_loads(text)
        except ValueError as e:
            failed = 1
            print("%s: INVALID\n  not strict JSON: %s" % (doc_path, e))
            continue
        errors = problems(schema, doc, jsonschema)
        if errors:
            failed = 1
            print("%s: INVALID" % doc_path)
            for e in errors:
                print("  " + e)
        else:
            print("%s: valid (%s)" % (doc_path, "jsonschema %s and the built-in validator" % version()
                                      if jsonschema else "built-in validator only: jsonschema not installed"))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
