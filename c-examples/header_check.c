/* Compiles kolibri.h on its own (nothing included before it) and twice, as C11. */
#include <kolibri.h>
#include <kolibri.h>

int kolibri_header_check_c(void);
int kolibri_header_check_c(void) { return KOLIBRI_STATUS_OK + KOLIBRI_VERSION_MAJOR; }
