file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "#include <string_view>\nnamespace gpufleet::embedded {\nstatic const unsigned char k_${NAME}[] = {${bytes} 0};\nstd::string_view ${NAME}() { return {reinterpret_cast<const char*>(k_${NAME}), sizeof(k_${NAME}) - 1}; }\n}\n")
