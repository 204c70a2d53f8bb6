/* Broken on purpose: see claims.pml, BROKEN_DONE. The checker must reject this model. */
#define BROKEN_DONE
#include "claims.pml"
