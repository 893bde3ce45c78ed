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

# gpufleet_embed_web(TARGET_VAR): generates a .cpp that defines
# `gpufleet::embedded::web_files()`, the dashboard's files (web/ and web/vendor/) by base name.
function(gpufleet_embed_web out_var)
  file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/web/*.html ${PROJECT_SOURCE_DIR}/web/*.js
       ${PROJECT_SOURCE_DIR}/web/*.css ${PROJECT_SOURCE_DIR}/web/vendor/*.js
       ${PROJECT_SOURCE_DIR}/web/vendor/*.css)
  list(SORT files)
  list(JOIN files "|" joined)
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/embedded_web.cpp)
  add_custom_command(
    OUTPUT ${gen}
    COMMAND ${CMAKE_COMMAND} "-DFILES=${joined}" -DOUT=${gen}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_web.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_web.cmake
    COMMENT "Embedding the dashboard (web/)"
    VERBATIM)
  set(${out_var} ${gen} PARENT_SCOPE)
endfunction()
