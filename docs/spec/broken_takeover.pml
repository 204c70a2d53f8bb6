/* Broken on purpose: see claims.pml, BROKEN_TAKEOVER. The checker must reject this model. */
#define BROKEN_TAKEOVER
#include "claims.pml"
