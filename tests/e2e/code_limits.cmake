# The size limits of the project's own code (docs/architecture.md): no file
# of agent/, collector/, cli/, tui/, rules/ or common/ over 1,000 lines, no
# function over 150.
add_test(NAME code_limits COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/code_limits.py ${PROJECT_SOURCE_DIR})
set_tests_properties(code_limits PROPERTIES TIMEOUT 60 LABELS "unit;style")
