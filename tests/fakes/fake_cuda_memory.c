/* The fake driver's memory calls (see fake_cuda.c for the rest). */
