"""The package version, written in this one place.

pyproject.toml reads it (scikit-build-core's regex metadata provider) and CMakeLists.txt
reads it (cmake/KdaVersion.cmake) for ``project(VERSION)``; ``kda_decode.__version__``
re-exports it. Change the version here only.
"""

__version__ = "0.1.0"
