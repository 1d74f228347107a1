# Turns the file IN into a C source OUT that defines pc_builtin_profile / pc_builtin_profile_len.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}" "/* Generated from tolerances/default.yaml by cmake/embed.cmake. */\n"
     "#include <stddef.h>\n"
     "extern const char pc_builtin_profile[];\nextern const size_t pc_builtin_profile_len;\n"
     "const char pc_builtin_profile[] = {${bytes} 0};\n"
     "const size_t pc_builtin_profile_len = ${len};\n")
