/* phoenix/visibility.h — PH_API marks what libphoenix exports; everything else in it is hidden. */
#ifndef PHOENIX_VISIBILITY_H
#define PHOENIX_VISIBILITY_H

#if defined(PHOENIX_BUILDING_LIBRARY)
#define PH_API __attribute__((visibility("default")))
#else
#define PH_API
#endif

#endif
