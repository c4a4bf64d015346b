// Stand-in for the header that CUDA builds of torch generate and CPU-only wheels lack.
// It lets CUDA sources that include c10/cuda headers compile on a CPU build worker; the
// evaluator adds this folder to the include path only when torch's own copy is missing.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
