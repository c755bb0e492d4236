# Fix-ups that make rosidl work from the ROS 2 wheels on PyPI (a plain venv instead of /opt/ros).
# On a regular ROS 2 install (apt, source build) every branch below is a no-op.

# rosidl finds its generators through the ament index on AMENT_PREFIX_PATH. In a venv nothing sets it,
# so add the prefix that ament_cmake itself was found in.
macro(embodied_r_add_ament_prefix)
  get_filename_component(_ament_prefix "${ament_cmake_DIR}/../../.." ABSOLUTE)
  if(NOT "$ENV{AMENT_PREFIX_PATH}" MATCHES "(^|:)${_ament_prefix}(:|$)")
    if("$ENV{AMENT_PREFIX_PATH}" STREQUAL "")
      set(ENV{AMENT_PREFIX_PATH} "${_ament_prefix}")
    else()
      set(ENV{AMENT_PREFIX_PATH} "$ENV{AMENT_PREFIX_PATH}:${_ament_prefix}")
    endif()
    message(STATUS "embodied_r_ros: added ${_ament_prefix} to AMENT_PREFIX_PATH")
  endif()
endmacro()

# The wheels' exported <pkg>__rosidl_generator_py targets carry the include directories of the machine the
# wheels were built on. Point any such target whose directories do not exist here at this interpreter's
# Python and NumPy headers.
function(embodied_r_fix_python_generator_targets)
  find_package(Python3 REQUIRED COMPONENTS Interpreter Development NumPy)
  get_property(_targets DIRECTORY PROPERTY IMPORTED_TARGETS)
  foreach(_target IN LISTS _targets)
    if(NOT _target MATCHES "__rosidl_generator_py$")
      continue()
    endif()
    get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_missing FALSE)
    foreach(_dir IN LISTS _dirs)
      if(NOT EXISTS "${_dir}")
        set(_missing TRUE)
      endif()
    endforeach()
    if(_missing)
      set_target_properties(${_target} PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${Python3_INCLUDE_DIRS};${Python3_NumPy_INCLUDE_DIRS}")
    endif()
  endforeach()
endfunction()

# With the venv inside the source tree (./.venv), the generated Python target exports this interpreter's
# include directories, which CMake refuses for installed targets under the source directory. They are only
# needed while building, so limit them to the build interface.
function(embodied_r_build_only_source_includes target)
  get_target_property(_dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _dirs)
    return()
  endif()
  set(_fixed "")
  foreach(_dir IN LISTS _dirs)
    string(FIND "${_dir}" "${CMAKE_SOURCE_DIR}/" _at)
    if(_at EQUAL 0)
      list(APPEND _fixed "$<BUILD_INTERFACE:${_dir}>")
    else()
      list(APPEND _fixed "${_dir}")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
endfunction()
