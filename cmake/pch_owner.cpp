// Owns a precompiled header (cmake/npw_pch.cmake) for libraries: nothing to compile but the
// header itself.
