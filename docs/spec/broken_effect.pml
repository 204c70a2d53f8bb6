/* Broken on purpose: see claims.pml, BROKEN_EFFECT. The checker must reject this model. */
#define BROKEN_EFFECT
#include "claims.pml"
