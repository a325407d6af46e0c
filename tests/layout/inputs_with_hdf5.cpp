// Not compiled: the file tests/layout's check is run on as if it lay in
// io/inputs (layout.catches_a_bad_include), to show the check refuses it.
#include <hdf5.h>
#include <mpi.h>

#include "io/archive/h5.h"
