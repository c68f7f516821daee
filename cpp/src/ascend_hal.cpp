// libascend_hal: the driver library the official C++ samples link. Nothing in it is called by the
// programs kvsim runs; it exists so that their link lines work unchanged.
