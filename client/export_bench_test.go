package client

// ProcessCPU exports processCPU to the external benchmarks.
var ProcessCPU = processCPU
