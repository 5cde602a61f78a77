# The package version from python/kda_decode/_version.py, the one place it is written
# (pyproject.toml reads the same line through scikit-build-core's regex provider).
#   KDA_VERSION          the version as written (PEP 440, e.g. 0.1.0 or 0.2.0rc1)
#   KDA_VERSION_NUMERIC  its leading numeric part, which project(VERSION) accepts
set(_kda_version_file "${CMAKE_CURRENT_LIST_DIR}/../python/kda_decode/_version.py")
file(STRINGS "${_kda_version_file}" _kda_version_line REGEX "^__version__ *= *[\"'][^\"']+[\"']")
string(REGEX REPLACE "^__version__ *= *[\"']([^\"']+)[\"'].*$" "\\1" KDA_VERSION "${_kda_version_line}")
string(REGEX MATCH "^[0-9]+(\\.[0-9]+)*" KDA_VERSION_NUMERIC "${KDA_VERSION}")
if(NOT KDA_VERSION_NUMERIC)
  message(FATAL_ERROR "kda-decode: no version in ${_kda_version_file} (expected a line __version__ = \"X.Y.Z\", "
                      "got '${_kda_version_line}')")
endif()
unset(_kda_version_file)
unset(_kda_version_line)
