/*
 * The bounded JSON reader (see json.h). Recursive descent over [text, text + len).
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "rt.h"

typedef struct {
  const char* s;
  size_t n, pos;
} parser;

static int fail_at(parser* p, const char* what) {
  return tvmrt_fail("GraphFormatError", "graph JSON is not valid JSON: %s at byte %zu", what,
                    p->pos);
}

static void skip_ws(parser* p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int peek(parser* p) { return p->pos < p->n ? (unsigned char)p->s[p->pos] : -1; }

static int literal(parser* p, const char* word) {
  size_t k = strlen(word);
  if (p->n - p->pos < k || memcmp(p->s + p->pos, word, k) != 0) return fail_at(p, "bad literal");
  p->pos += k;
  return 0;
}

static int hex4(parser* p, unsigned* out) {
  unsigned v = 0;
  int k;
  if (p->n - p->pos < 4) return fail_at(p, "short \\u escape");
  for (k = 0; k < 4; ++k) {
    char c = p->s[p->pos++];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return fail_at(p, "bad \\u escape");
  }
  *out = v;
  return 0;
}

static int parse_string(parser* p, char** out) {
  size_t start = ++p->pos, cap = 16, len = 0;
  char* buf = (char*)malloc(cap);
  (void)start;
  if (buf == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a JSON string");
  for (;;) {
    unsigned cp = 0;
    char enc[4];
    size_t k = 0, j;
    int c = peek(p);
    if (c < 0) {
      free(buf);
      return fail_at(p, "unterminated string");
    }
    p->pos++;
    if (c == '"') break;
    if (c < 0x20) {
      free(buf);
      return fail_at(p, "control character in a string");
    }
    if (c != '\\') {
      enc[k++] = (char)c;
    } else {
      int e = peek(p);
      p->pos++;
      switch (e) {
        case '"':
        case '\\':
        case '/': enc[k++] = (char)e; break;
        case 'b': enc[k++] = '\b'; break;
        case 'f': enc[k++] = '\f'; break;
        case 'n': enc[k++] = '\n'; break;
        case 'r': enc[k++] = '\r'; break;
        case 't': enc[k++] = '\t'; break;
        case 'u':
          if (hex4(p, &cp) != 0) {
            free(buf);
            return -1;
          }
          if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD; /* no NULs, no halves */
          if (cp < 0x80) {
            enc[k++] = (char)cp;
          } else if (cp < 0x800) {
            enc[k++] = (char)(0xC0 | (cp >> 6));
            enc[k++] = (char)(0x80 | (cp & 0x3F));
          } else {
            enc[k++] = (char)(0xE0 | (cp >> 12));
            enc[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            enc[k++] = (char)(0x80 | (cp & 0x3F));
          }
          break;
        default: free(buf); return fail_at(p, "bad escape");
      }
    }
    if (len + k + 1 > cap) {
      char* grown;
      while (len + k + 1 > cap) cap *= 2;
      grown = (char*)realloc(buf, cap);
      if (grown == NULL) {
        free(buf);
        return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate a JSON string");
      }
      buf = grown;
    }
    for (j = 0; j < k; ++j) buf[len++] = enc[j];
  }
  buf[len] = '\0';
  *out = buf;
  return 0;
}

static size_t digits(parser* p) {
  size_t start = p->pos;
  while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
  return p->pos - start;
}

/* RFC 8259's grammar, as Python's json: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, so a
   leading zero (007) is an error, not a number */
static int parse_number(parser* p, tvmrt_json* v) {
  char tmp[64];
  size_t start = p->pos, k;
  int integral = 1;
  char* end;
  if (peek(p) == '-') p->pos++;
  if (peek(p) == '0') {
    p->pos++;
    if (peek(p) >= '0' && peek(p) <= '9') return fail_at(p, "bad number (a leading zero)");
  } else if (digits(p) == 0) {
    return fail_at(p, "bad number");
  }
  if (peek(p) == '.') {
    p->pos++;
    integral = 0;
    if (digits(p) == 0) return fail_at(p, "bad number");
  }
  if (peek(p) == 'e' || peek(p) == 'E') {
    p->pos++;
    integral = 0;
    if (peek(p) == '+' || peek(p) == '-') p->pos++;
    if (digits(p) == 0) return fail_at(p, "bad number");
  }
  k = p->pos - start;
  if (k >= sizeof(tmp)) return fail_at(p, "bad number");
  memcpy(tmp, p->s + start, k);
  tmp[k] = '\0';
  v->type = RT_JSON_NUMBER;
  v->d = strtod(tmp, &end);
  if (*end != '\0') return fail_at(p, "bad number");
  if (integral) {
    long long x = strtoll(tmp, &end, 10);
    v->is_int = *end == '\0' && k < 19;
    v->i = x;
  }
  return 0;
}

static int parse_value(parser* p, tvmrt_json* v, int depth);

static int grow(tvmrt_json* v, size_t* cap, int with_keys) {
  size_t ncap;
  tvmrt_json* items;
  if (v->count < *cap) return 0;
  ncap = *cap ? *cap * 2 : 4;
  items = (tvmrt_json*)realloc(v->items, ncap * sizeof(tvmrt_json));
  if (items == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate JSON");
  v->items = items;
  if (with_keys) {
    char** keys = (char**)realloc(v->keys, ncap * sizeof(char*));
    if (keys == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate JSON");
    v->keys = keys;
  }
  *cap = ncap;
  return 0;
}

static int parse_container(parser* p, tvmrt_json* v, int depth, int is_object) {
  size_t cap = 0;
  char close = is_object ? '}' : ']';
  v->type = is_object ? RT_JSON_OBJECT : RT_JSON_ARRAY;
  p->pos++;
  skip_ws(p);
  if (peek(p) == close) {
    p->pos++;
    return 0;
  }
  for (;;) {
    tvmrt_json* item;
    skip_ws(p);
    if (grow(v, &cap, is_object) != 0) return -1;
    item = &v->items[v->count];
    memset(item, 0, sizeof(*item));
    if (is_object) {
      v->keys[v->count] = NULL;
      if (peek(p) != '"') return fail_at(p, "expected a key");
      v->count++; /* counted now so the key is freed on failure */
      if (parse_string(p, &v->keys[v->count - 1]) != 0) return -1;
      skip_ws(p);
      if (peek(p) != ':') return fail_at(p, "expected ':'");
      p->pos++;
      skip_ws(p);
    } else {
      v->count++;
    }
    if (parse_value(p, item, depth + 1) != 0) return -1;
    skip_ws(p);
    if (peek(p) == ',') {
      p->pos++;
      continue;
    }
    if (peek(p) == close) {
      p->pos++;
      return 0;
    }
    return fail_at(p, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(parser* p, tvmrt_json* v, int depth) {
  int c;
  if (depth > RT_JSON_MAX_DEPTH) return fail_at(p, "nested too deeply");
  skip_ws(p);
  c = peek(p);
  switch (c) {
    case '{': return parse_container(p, v, depth, 1);
    case '[': return parse_container(p, v, depth, 0);
    case '"': v->type = RT_JSON_STRING; return parse_string(p, &v->str);
    case 't':
      v->type = RT_JSON_BOOL;
      v->i = 1;
      return literal(p, "true");
    case 'f': v->type = RT_JSON_BOOL; return literal(p, "false");
    case 'n': v->type = RT_JSON_NULL; return literal(p, "null");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
      return fail_at(p, c < 0 ? "unexpected end" : "unexpected character");
  }
}

static void free_inner(tvmrt_json* v) {
  size_t i;
  for (i = 0; i < v->count; ++i) {
    free_inner(&v->items[i]);
    if (v->keys != NULL) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
}

void tvmrt_json_free(tvmrt_json* v) {
  if (v == NULL) return;
  free_inner(v);
  free(v);
}

int tvmrt_json_parse(const char* text, size_t len, tvmrt_json** out) {
  parser p = {text, len, 0};
  tvmrt_json* v = (tvmrt_json*)calloc(1, sizeof(tvmrt_json));
  *out = NULL;
  if (v == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot allocate JSON");
  if (parse_value(&p, v, 0) != 0) {
    tvmrt_json_free(v);
    return -1;
  }
  skip_ws(&p);
  if (p.pos != p.n) {
    tvmrt_json_free(v);
    return fail_at(&p, "extra data after the value");
  }
  *out = v;
  return 0;
}

const tvmrt_json* tvmrt_json_get(const tvmrt_json* obj, const char* key) {
  size_t i;
  const tvmrt_json* found = NULL;
  if (obj == NULL || obj->type != RT_JSON_OBJECT) return NULL;
  for (i = 0; i < obj->count; ++i) {
    if (obj->keys[i] != NULL && strcmp(obj->keys[i], key) == 0) found = &obj->items[i];
  }
  return found;
}
