/* Umbrella header of the CKolibri module: the installed C API, found on pkg-config's -I path. */
#include <kolibri.h>
