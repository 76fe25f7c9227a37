/* A VM's masked CPU model, as OpenBLAS sees it: LD_PRELOADed by
   weft-run-errors.test so that weft-run believes OpenBLAS chose its generic
   pre-AVX kernels, and restarts itself with OPENBLAS_CORETYPE set. */
const char *openblas_get_corename(void) { return "Prescott"; }
