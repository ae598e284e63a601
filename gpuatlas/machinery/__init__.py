"""The run machinery: a run's record and its probe processes (runner, workers), the device's properties read
once per run (device) and the checks of an install (doctor).  It drives probes/ and is never imported by it."""
