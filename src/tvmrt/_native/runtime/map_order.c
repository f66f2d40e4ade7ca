/* The order TVM v0.8's Map<String, T> iterates names inserted one by one: the order DLR 1.10
 * lists a model's weights in (GetDLRWeightName), since its graph executor reads the params file
 * into such a Map (runtime::LoadParams, then a range-for over it).
 *
 * TVM's Map (include/tvm/runtime/container/map.h at v0.8.0) keeps up to four entries in
 * insertion order (SmallMapNode); from the fifth on it is a DenseMapNode: a power-of-two table
 * whose slots are visited in index order, a name's home slot being the Fibonacci hash of its
 * String hash, which is libstdc++'s std::hash<std::string_view> (MurmurHash2, 64-bit, seed
 * 0xc70f6907) on Linux, where DLR's wheels are built. Names sharing a home slot form a list
 * through the jump distances of kNextProbeLocation; a name whose home slot holds another
 * list's member moves that list away; a table past its load factor of 0.99 is rehashed into
 * one twice the size (the new name first, then the old slots in order). This file replays that
 * algorithm, so DLR's order comes out for any names, whatever hash order they have. A name
 * inserted twice keeps its first place (Map::Set overwrites the value). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../native.h"

#define EMPTY 0xFFu
#define PROTECTED 0xFEu
#define NUM_JUMPS 126
#define SMALL_MAX 4

static const uint64_t k_probe[NUM_JUMPS] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    /* triangle numbers */
    21, 28, 36, 45, 55, 66, 78, 91, 105, 120, 136, 153, 171, 190, 210, 231, 253, 276, 300, 325, 351,
    378, 406, 435, 465, 496, 528, 561, 595, 630, 666, 703, 741, 780, 820, 861, 903, 946, 990, 1035,
    1081, 1128, 1176, 1225, 1275, 1326, 1378, 1431, 1485, 1540, 1596, 1653, 1711, 1770, 1830, 1891,
    1953, 2016, 2080, 2145, 2211, 2278, 2346, 2415, 2485, 2556, 2628,
    /* larger triangle numbers */
    8515, 19110, 42778, 96141, 216153, 486591, 1092981, 2458653, 5532801, 12442566, 27993903,
    62983476, 141717030, 318844378, 717352503, 1614057336, 3631522476ull, 8170957530ull,
    18384510628ull, 41364789378ull, 93070452520ull, 209408356380ull, 471168559170ull,
    1060128894105ull, 2385289465695ull, 5366898840628ull, 12075518705635ull, 27169915244790ull,
    61132312065111ull, 137547689707000ull, 309482283181501ull, 696335127828753ull,
    1566753995631385ull, 3525196511162271ull, 7931691992677701ull, 17846306936293605ull,
    40154190677507445ull, 90346928918121501ull, 203280589587557251ull, 457381325854679626ull,
    1029107982097042876ull, 2315492959180353330ull, 5209859154120846435ull};

static uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

/* libstdc++'s _Hash_bytes (libsupc++/hash_bytes.cc, 64-bit size_t) */
static uint64_t hash_bytes(const char* data, size_t len) {
  const uint64_t mul = (((uint64_t)0xc6a4a793u) << 32) + 0x5bd1e995u;
  const size_t aligned = len & ~(size_t)7;
  uint64_t hash = 0xc70f6907u ^ (len * mul);
  size_t i;
  for (i = 0; i < aligned; i += 8) {
    uint64_t v = 0;
    int b;
    for (b = 7; b >= 0; --b) v = (v << 8) + (unsigned char)data[i + (size_t)b];
    hash ^= shift_mix(v * mul) * mul;
    hash *= mul;
  }
  if (len & 7) {
    uint64_t v = 0;
    size_t b;
    for (b = len & 7; b-- > 0;) v = (v << 8) + (unsigned char)data[aligned + b];
    hash ^= v;
    hash *= mul;
  }
  return shift_mix(shift_mix(hash) * mul);
}

typedef struct {
  uint32_t shift; /* Fibonacci hashing: index = (hash * coeff) >> shift */
  uint64_t mask;  /* slots - 1 */
  uint8_t* meta;  /* per slot: EMPTY, PROTECTED, or (tail bit 0x80 | jump index) */
  size_t* name;   /* per slot: the index of the name it holds */
  uint64_t* home; /* per name: its hash (its home slot follows from shift) */
  size_t size;
} table;

static uint64_t home_slot(const table* t, size_t name) {
  return (t->home[name] * 11400714819323198485ull) >> t->shift;
}
static int occupied(uint8_t m) { return m != EMPTY && m != PROTECTED; }
static int is_head(uint8_t m) { return occupied(m) && (m & 0x80u) == 0; }
static int is_full(const table* t) { return (double)(t->size + 1) > (double)(t->mask + 1) * 0.99; }

/* the next slot on a list from `slot` with metadata `m`, or -1 at its end */
static int64_t next_slot(const table* t, uint64_t slot, uint8_t m) {
  uint64_t jump = k_probe[m & 0x7Fu];
  return jump == 0 ? -1 : (int64_t)((slot + jump) & t->mask);
}
static void set_jump(table* t, uint64_t slot, uint8_t jump) {
  t->meta[slot] = (uint8_t)((t->meta[slot] & 0x80u) | jump);
}
/* the first empty slot a jump away from `slot` (0 when none: rehash) */
static uint8_t next_empty(const table* t, uint64_t slot, uint64_t* out) {
  uint8_t j;
  for (j = 1; j < NUM_JUMPS; ++j) {
    uint64_t c = (slot + k_probe[j]) & t->mask;
    if (t->meta[c] == EMPTY) {
      *out = c;
      return j;
    }
  }
  return 0;
}

/* DenseMapNode::TrySpareListHead: move the list through `target` away, put `name` there */
static int spare(table* t, uint64_t target, size_t name) {
  uint64_t r = target, w = home_slot(t, t->name[target]), empty;
  int first = 1;
  int64_t n;
  for (n = next_slot(t, w, t->meta[w]); (uint64_t)n != target; n = next_slot(t, w, t->meta[w])) {
    w = (uint64_t)n; /* the element before target on its list */
  }
  for (;;) {
    uint8_t jump = next_empty(t, w, &empty), r_meta;
    if (jump == 0) return 0;
    t->meta[empty] = 0x80u;
    t->name[empty] = t->name[r];
    r_meta = t->meta[r];
    t->meta[r] = first ? PROTECTED : EMPTY;
    first = 0;
    set_jump(t, w, jump);
    w = empty;
    n = next_slot(t, r, r_meta);
    if (n < 0) break;
    r = (uint64_t)n;
  }
  t->meta[target] = 0;
  t->name[target] = name;
  t->size += 1;
  return 1;
}

/* DenseMapNode::TryInsert: 1 inserted (or already there), 0 the table must grow */
static int try_insert(table* t, size_t name, const char* const* names) {
  uint64_t slot = home_slot(t, name), tail = slot, empty;
  int64_t n;
  uint8_t jump;
  if (t->meta[slot] == EMPTY) {
    t->meta[slot] = 0;
    t->name[slot] = name;
    t->size += 1;
    return 1;
  }
  if (!is_head(t->meta[slot])) return is_full(t) ? 0 : spare(t, slot, name);
  for (n = (int64_t)slot; n >= 0; n = next_slot(t, (uint64_t)n, t->meta[n])) {
    if (strcmp(names[t->name[n]], names[name]) == 0) return 1;
    tail = (uint64_t)n;
  }
  if (is_full(t)) return 0;
  jump = next_empty(t, tail, &empty);
  if (jump == 0) return 0;
  t->meta[empty] = 0x80u;
  t->name[empty] = name;
  set_jump(t, tail, jump);
  t->size += 1;
  return 1;
}

static int table_init(table* t, uint32_t shift, uint64_t slots, uint64_t* home) {
  t->shift = shift;
  t->mask = slots - 1;
  t->meta = (uint8_t*)malloc(slots);
  t->name = (size_t*)calloc(slots, sizeof(size_t));
  t->home = home;
  t->size = 0;
  if (t->meta == NULL || t->name == NULL) {
    free(t->meta);
    free(t->name);
    return -1;
  }
  memset(t->meta, EMPTY, slots);
  return 0;
}

/* DenseMapNode::InsertMaybeReHash */
static int insert(table* t, size_t name, const char* const* names) {
  table bigger;
  uint64_t i;
  if (try_insert(t, name, names)) return 0;
  if (t->mask + 1 > (UINT64_MAX >> 2) || t->shift == 0) return -1;
  if (table_init(&bigger, t->shift - 1, (t->mask + 1) * 2, t->home) != 0) return -1;
  if (insert(&bigger, name, names) != 0) goto fail;
  for (i = 0; i <= t->mask; ++i) {
    if (occupied(t->meta[i]) && insert(&bigger, t->name[i], names) != 0) goto fail;
  }
  free(t->meta);
  free(t->name);
  *t = bigger;
  return 0;
fail:
  free(bigger.meta);
  free(bigger.name);
  return -1;
}

TVM_DLL int tvmrt_map_order(const char* const* names, size_t count, size_t* order,
                            size_t* num_order) {
  table t;
  uint64_t* home;
  size_t small[SMALL_MAX], num_small = 0, i, j, k = 0;
  int dense = 0;
  if (count > ((size_t)1 << 40)) return -1;
  home = (uint64_t*)malloc((count ? count : 1) * sizeof(uint64_t));
  if (home == NULL) return -1;
  for (i = 0; i < count; ++i) home[i] = hash_bytes(names[i], strlen(names[i]));
  for (i = 0; i < count; ++i) {
    if (!dense) {
      int seen = 0;
      for (j = 0; j < num_small; ++j) seen |= strcmp(names[small[j]], names[i]) == 0;
      if (seen) continue;
      if (num_small < SMALL_MAX) {
        small[num_small++] = i;
        continue;
      }
      /* CreateFromRange of the four: CalcTableSize(4) gives 8 slots, shift 61 */
      if (table_init(&t, 61, 8, home) != 0) goto oom;
      dense = 1;
      for (j = 0; j < num_small; ++j) {
        if (insert(&t, small[j], names) != 0) goto oom_table;
      }
    }
    if (insert(&t, i, names) != 0) goto oom_table;
  }
  if (!dense) {
    for (j = 0; j < num_small; ++j) order[k++] = small[j];
  } else {
    uint64_t s;
    for (s = 0; s <= t.mask; ++s) {
      if (occupied(t.meta[s])) order[k++] = t.name[s];
    }
    free(t.meta);
    free(t.name);
  }
  free(home);
  *num_order = k;
  return 0;
oom_table:
  free(t.meta);
  free(t.name);
oom:
  free(home);
  return -1;
}
