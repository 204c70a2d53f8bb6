/* Broken on purpose: clocks differ by more than the expiry rule allows for. */
#define SKEW 2
#define ALLOW 1
#include "claims.pml"
