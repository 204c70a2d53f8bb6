/* Broken on purpose: see claims.pml, BROKEN_RENEW. The checker must reject this model. */
#define BROKEN_RENEW
#include "claims.pml"
