# Warnings are errors for every C target (gcc and clang alike).
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C>:-Wall;-Wextra;-Werror;-Wshadow;-Wstrict-prototypes;-Wno-unused-parameter>"
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Werror>")

if(FSS_SANITIZE)
  # address + undefined; UB reports abort so a test cannot pass over them.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined;-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=address,undefined)
endif()

if(FSS_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # Coverage for the code the fuzz targets reach (the libraries they link).
  add_compile_options("$<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link>")
endif()
