// Compiles kolibri.h on its own (nothing included before it) and twice, as C++17.
#include <kolibri.h>
#include <kolibri.h>

int kolibri_header_check_cpp();
int kolibri_header_check_cpp() { return static_cast<int>(KOLIBRI_STATUS_OK) + KOLIBRI_VERSION_MAJOR; }
