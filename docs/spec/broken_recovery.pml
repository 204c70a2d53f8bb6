/* Broken on purpose: nobody ever takes over an expired claim. The liveness check must fail. */
#define BROKEN_RECOVERY
#include "claims.pml"
