// Owns a precompiled header (cmake/npw_pch.cmake) for executables: nothing to compile but the
// header itself, and an empty main so that it links. (Not a -D switch: GCC refuses a
// precompiled header made with a macro that the files using it lack.)
int main() { return 0; }
