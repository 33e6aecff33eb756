#!/usr/bin/env python3
"""Print the record field tables of docs/format.md from common/record.h.

The header is the source of truth; run this after changing a record and paste
its output into docs/format.md (tests/unit/record_test.c checks that every
field of every record is listed there at its offset).
"""
import re
import sys

SIZES = {'uint64_t': 8, 'uint32_t': 4, 'int32_t': 4, 'uint16_t': 2, 'uint8_t': 1}


def main(path):
    src = open(path).read()
    arrays = dict(re.findall(r'#define (FSS_\w+) (\d+)u', src))
    for m in re.finditer(r'struct (fss_rec_\w+|fss_record_head) \{\n(.*?)\n\};', src, re.S):
        name, body = m.groups()
        rows, off = [], 0
        for line in body.split('\n'):
            fm = re.match(r'\s*(struct fss_record_head|u?int\d+_t|char) (\w+)(?:\[(\w+)\])?;\s*(?:/\*\s*(.*?)\s*\*/)?', line)
            if not fm:
                continue
            typ, field, arr, comment = fm.groups()
            if typ == 'struct fss_record_head':
                size, comment = 8, 'type, size, source (see fss_record_head)'
            elif typ == 'char':
                size = int(arrays.get(arr, arr))
            else:
                size = SIZES[typ]
            typ = typ + ('[%s]' % arr if arr else '')
            rows.append((off, size, typ, field, (comment or '').replace('|', '\\|')))
            off += size
        print('### `struct %s` (%d bytes)\n' % (name, off))
        print('| offset | size | type | field | meaning |\n|---:|---:|---|---|---|')
        for r in rows:
            print('| %d | %d | `%s` | `%s` | %s |' % r)
        print()


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else 'common/record.h')
