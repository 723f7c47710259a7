# docs.registry: docs/properties.md must be what the registry generates
# (`softmax-audit check --list --markdown`); run with -DCLI=... -DDOC=...
execute_process(COMMAND ${CLI} check --list --markdown OUTPUT_VARIABLE generated
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "softmax-audit check --list --markdown exited ${rc}")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "${DOC} differs from the property registry; regenerate it with: "
                      "softmax-audit check --list --markdown > docs/properties.md")
endif()
