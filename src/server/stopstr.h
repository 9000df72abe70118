/* Stop sequences on streamed text: where the first one starts, and how much of the text can be
 * released because no stop sequence can begin in it any more. */
#ifndef Q35_SERVER_STOPSTR_H
#define Q35_SERVER_STOPSTR_H
#include <stddef.h>

/* text[len]: answer text not yet released. Returns the offset of the earliest complete stop
 * sequence, or -1; *safe gets how many leading bytes cannot be the start of one (all of text
 * when a match was found before them). Empty stop strings are ignored. */
long srv_stop_scan(const char *text, size_t len, char *const *stops, int n_stops, size_t *safe);
#endif
