# find_package(paritycheck): the imported target paritycheck::paritycheck (the shared library,
# with the public headers on its include path).
include("${CMAKE_CURRENT_LIST_DIR}/paritycheckTargets.cmake")
