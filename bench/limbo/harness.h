/* harness.h: shared bits of the C peer harnesses (OpenSSL, GnuTLS).
 * Each harness defines `static int evaluate(json_t *tc)` returning 1 (chain
 * accepted), 0 (rejected), UNPARSABLE (the library refused to parse a cert or
 * CRL: a rejection, verdict FAILURE, counted apart) or HARNESS_ERROR (the
 * harness could not set the case up: counted, verdict FAILURE), and
 * `static const char *library_version(void)`, then includes this file, whose
 * main() reads the limbo JSON (argv[1]) and prints "<id>\t<verdict>" per case. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNPARSABLE (-2)
#define HARNESS_ERROR (-1)
static int evaluate(json_t *tc);
static const char *library_version(void);

/* The string field `key` of a JSON object, or NULL. */
static const char *str(json_t *obj, const char *key)
{
  return json_string_value(json_object_get(obj, key));
}

/* Parse limbo's RFC 3339 validation_time ("2024-01-01T00:00:00+00:00" or
 * "...Z") into *out; returns 0 if the field is null (meaning "now"), 1 if
 * parsed, -1 if malformed. */
static int validation_time(json_t *tc, time_t *out)
{
  const char *s = str(tc, "validation_time");
  struct tm tm = {0};
  int n = 0, oh = 0, om = 0;
  char sign = '+';
  if (!s) return 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6) return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  s += n;
  if (*s == '.') s += 1 + strspn(s + 1, "0123456789"); /* drop a fraction */
  if (*s != 'Z' && sscanf(s, "%c%d:%d", &sign, &oh, &om) != 3) return -1;
  *out = timegm(&tm) - (sign == '-' ? -1 : 1) * (oh * 3600 + om * 60);
  return 1;
}

int main(int argc, char **argv)
{
  json_error_t jerr;
  json_t *suite, *tc;
  size_t i;
  int errors = 0, unparsable = 0;
  if (argc != 2) { fprintf(stderr, "usage: %s SUITE.json\n", argv[0]); return 2; }
  suite = json_load_file(argv[1], 0, &jerr);
  if (!suite) { fprintf(stderr, "%s: %s\n", argv[1], jerr.text); return 2; }
  fprintf(stderr, "version: %s\n", library_version());
  json_array_foreach(json_object_get(suite, "testcases"), i, tc) {
    int r = evaluate(tc);
    if (r == HARNESS_ERROR) {
      errors++;
      fprintf(stderr, "harness error: %s\n", str(tc, "id"));
    } else if (r == UNPARSABLE) {
      unparsable++;
      fprintf(stderr, "unparsable input: %s\n", str(tc, "id"));
    }
    printf("%s\t%s\n", str(tc, "id"), r == 1 ? "SUCCESS" : "FAILURE");
  }
  fprintf(stderr, "unparsable inputs (FAILURE): %d\n", unparsable);
  fprintf(stderr, "harness errors: %d\n", errors);
  json_decref(suite);
  return 0;
}
