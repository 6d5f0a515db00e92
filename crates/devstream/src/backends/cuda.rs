//! The CUDA backend's facade variants.

use devstream_cuda::{CudaBuffer, CudaEvent, CudaFlag, CudaGraph, CudaHostBuffer, CudaStream};

super::facade_variant!(Cuda: CudaStream, CudaEvent, CudaGraph, CudaFlag, CudaBuffer, CudaHostBuffer);
