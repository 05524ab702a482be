"""Programs the benchmarks run as scripts of their own (under torchrun), shipped with the package."""
