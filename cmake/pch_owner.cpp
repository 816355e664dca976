// Owns a precompiled header (cmake/npw_pch.cmake): nothing to compile but the header itself.
