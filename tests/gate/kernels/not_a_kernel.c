/* A shared library that is not a kernel: exports no sa_kernel_entry. */
__attribute__((visibility("default"))) int something_else(void) { return 42; }
