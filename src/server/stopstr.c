#include "server/stopstr.h"

#include <string.h>

long srv_stop_scan(const char *text, size_t len, char *const *stops, int n_stops, size_t *safe) {
    long first = -1;
    for (int k = 0; k < n_stops; k++) {
        size_t sl = strlen(stops[k]);
        if (sl == 0 || sl > len) continue;
        for (size_t i = 0; i + sl <= len; i++)
            if (!memcmp(text + i, stops[k], sl)) {
                if (first < 0 || (long)i < first) first = (long)i;
                break;
            }
    }
    if (first >= 0) {
        *safe = (size_t)first;
        return first;
    }
    /* hold back the longest tail that is a proper prefix of some stop sequence */
    size_t hold = 0;
    for (int k = 0; k < n_stops; k++) {
        size_t sl = strlen(stops[k]);
        for (size_t t = sl - (sl > 0); t > hold; t--) /* tail lengths shorter than the stop */
            if (t <= len && !memcmp(text + len - t, stops[k], t)) {
                hold = t;
                break;
            }
    }
    *safe = len - hold;
    return -1;
}
