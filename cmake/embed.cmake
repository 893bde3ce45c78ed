# gpufleet_embed(TARGET_VAR NAME FILE): generates a .cpp that defines
# `std::string_view gpufleet::embedded::NAME()` holding FILE's bytes, so shipped data
# (the GPU catalogue, the example fleet) works from any working directory.
function(gpufleet_embed out_var name file)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/embedded_${name}.cpp)
  add_custom_command(
    OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} -DIN=${src} -DOUT=${gen} -DNAME=${name}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${src} ${PROJECT_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${file}")
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
