/*
 * The graph's cross-checks the Python runtime makes (graph.py: node_row_ptr against
 * num_outputs, inputs and heads naming entries of earlier nodes, arg_nodes null nodes with
 * unique names, every null node listed in arg_nodes) and the storage plan's checks, the Python
 * runtime's (runtime/graph_executor/storage.py, check_input_pools, and lifetimes.py,
 * check_lifetimes) with the same words: no input shares a pool with another input or with a
 * kernel's output, and no two entries alive at the same time share a pool. A damaged storage_id
 * table otherwise runs to a wrong answer.
 *
 * Lifetimes follow TVM's planner, as lifetimes.py explains: an entry lives from the node
 * that writes it to the last node that reads it; inputs, params and graph outputs live for
 * the whole run; a __nop output in its input's pool is that value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* the node whose outputs include entry eid */
static uint32_t node_of(const tvmrt_graph* g, size_t eid) {
  size_t lo = 0, hi = g->num_nodes; /* row_ptr[lo] <= eid < row_ptr[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (g->row_ptr[mid] <= eid) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (uint32_t)lo;
}

static int check_input_pools(const tvmrt_graph* g) {
  int64_t* owner = (int64_t*)malloc((g->num_storage ? g->num_storage : 1) * sizeof(int64_t));
  size_t i, nid;
  int rc = 0;
  if (owner == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot check the storage plan");
  for (i = 0; i < g->num_storage; ++i) owner[i] = -1;
  for (i = 0; i < g->num_args && rc == 0; ++i) {
    uint32_t nid_in = g->arg_nodes[i];
    int64_t sid = g->storage_ids[tvmrt_graph_eid(g, nid_in, 0)];
    if (owner[sid] < 0) {
      owner[sid] = nid_in;
    } else if (owner[sid] != (int64_t)nid_in) {
      rc = tvmrt_fail("GraphFormatError",
                      "graph JSON: inputs '%.200s' (node %lld) and '%.200s' (node %u) share "
                      "storage pool %lld; every input needs a pool of its own, or setting one "
                      "overwrites the other",
                      g->nodes[owner[sid]].name, (long long)owner[sid], g->nodes[nid_in].name,
                      nid_in, (long long)sid);
    }
  }
  for (nid = 0; nid < g->num_nodes && rc == 0 && g->num_args > 0; ++nid) {
    const tvmrt_node* node = &g->nodes[nid];
    uint32_t k;
    if (!node->is_op || strcmp(node->func_name, "__nop") == 0) continue;
    for (k = 0; k < node->num_outputs && rc == 0; ++k) {
      int64_t sid = g->storage_ids[tvmrt_graph_eid(g, (uint32_t)nid, k)];
      if (owner[sid] < 0) continue;
      rc = tvmrt_fail("GraphFormatError",
                      "graph JSON: node %zu ('%.200s') writes output %u into storage pool %lld, "
                      "which holds input '%.200s' (node %lld); every run would overwrite that "
                      "input, so an input's pool may only be shared with __nop reshapes of it",
                      nid, node->name, k, (long long)sid, g->nodes[owner[sid]].name,
                      (long long)owner[sid]);
    }
  }
  free(owner);
  return rc;
}

static void describe(const tvmrt_graph* g, size_t e, const int64_t* start, const int64_t* end,
                     char* buf, size_t n) {
  int64_t forever = (int64_t)g->num_nodes;
  uint32_t nid = node_of(g, e);
  const tvmrt_node* node = &g->nodes[nid];
  char what[300], alive[96];
  if (!node->is_op) {
    snprintf(what, sizeof(what), "input; ");
  } else if (strcmp(node->func_name, node->name) == 0) {
    what[0] = '\0';
  } else {
    snprintf(what, sizeof(what), "kernel '%.200s'; ", node->func_name);
  }
  if (start[e] < 0) {
    snprintf(alive, sizeof(alive), "alive for the whole run");
  } else if (end[e] >= forever) {
    snprintf(alive, sizeof(alive), "alive from node %lld to the end (a graph output)",
             (long long)start[e]);
  } else {
    snprintf(alive, sizeof(alive), "alive at nodes %lld..%lld", (long long)start[e],
             (long long)end[e]);
  }
  snprintf(buf, n, "output %u of node %u '%.200s' (%s%s)", (uint32_t)(e - g->row_ptr[nid]), nid,
           node->name, what, alive);
}

static int overlap_error(const tvmrt_graph* g, int64_t sid, size_t a, size_t b,
                         const int64_t* start, const int64_t* end) {
  char da[700], db[700];
  int64_t at = start[a] > start[b] ? start[a] : start[b];
  describe(g, a, start, end, da, sizeof(da));
  describe(g, b, start, end, db, sizeof(db));
  return tvmrt_fail("GraphFormatError",
                    "graph JSON: attrs['storage_id'] puts %s and %s in storage pool %lld, but "
                    "both are alive at node %lld: writing one overwrites the other, so results "
                    "would be wrong. Entries may share a pool only when their lifetimes do not "
                    "overlap (a __nop reshape shares its input's)",
                    da, db, (long long)sid, (long long)(at > 0 ? at : 0));
}

static int check_lifetimes(const tvmrt_graph* g) {
  size_t n = g->num_entries ? g->num_entries : 1, e, nid, i;
  int64_t forever = (int64_t)g->num_nodes;
  int64_t* owner = (int64_t*)malloc(n * sizeof(int64_t));
  int64_t* start = (int64_t*)calloc(n, sizeof(int64_t));
  int64_t* end = (int64_t*)calloc(n, sizeof(int64_t));
  int64_t* latest = (int64_t*)malloc((g->num_storage ? g->num_storage : 1) * sizeof(int64_t));
  int rc = 0;
  if (!owner || !start || !end || !latest) {
    rc = tvmrt_fail("DeviceOutOfMemoryError", "cannot check the storage plan");
    goto done;
  }
  for (e = 0; e < g->num_entries; ++e) owner[e] = (int64_t)e;
  for (nid = 0; nid < g->num_nodes; ++nid) {
    const tvmrt_node* node = &g->nodes[nid];
    size_t first = g->row_ptr[nid], count = g->row_ptr[nid + 1] - first, k;
    if (!node->is_op) {
      start[first] = -1;
      end[first] = forever;
      continue;
    }
    for (i = 0; i < node->num_inputs; ++i) {
      int64_t src = owner[tvmrt_graph_eid(g, node->inputs[i].nid, node->inputs[i].index)];
      if (end[src] < (int64_t)nid) end[src] = (int64_t)nid;
    }
    for (k = 0; k < count; ++k) start[first + k] = end[first + k] = (int64_t)nid;
    if (strcmp(node->func_name, "__nop") == 0) { /* runs nothing: in its input's pool it is it */
      for (k = 0; k < count && k < node->num_inputs; ++k) {
        int64_t src = owner[tvmrt_graph_eid(g, node->inputs[k].nid, node->inputs[k].index)];
        if (g->storage_ids[src] == g->storage_ids[first + k]) owner[first + k] = src;
      }
    }
  }
  for (i = 0; i < g->num_heads; ++i) {
    end[owner[tvmrt_graph_eid(g, g->heads[i].nid, g->heads[i].index)]] = forever;
  }
  /* values in entry order start in node order: per pool, keep the one that lives longest */
  for (i = 0; i < g->num_storage; ++i) latest[i] = -1;
  for (e = 0; e < g->num_entries && rc == 0; ++e) {
    int64_t sid = g->storage_ids[e], prev;
    if (owner[e] != (int64_t)e) continue;
    prev = latest[sid];
    if (prev < 0) {
      latest[sid] = (int64_t)e;
    } else if (start[e] <= end[prev]) {
      rc = overlap_error(g, sid, (size_t)prev, e, start, end);
    } else if (end[e] > end[prev]) {
      latest[sid] = (int64_t)e;
    }
  }
done:
  free(owner);
  free(start);
  free(end);
  free(latest);
  return rc;
}

typedef struct {
  const char* name;
  size_t pos; /* in arg_nodes */
} named_arg;

static int by_name_then_pos(const void* a, const void* b) {
  const named_arg *x = (const named_arg*)a, *y = (const named_arg*)b;
  int c = strcmp(x->name, y->name);
  return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Inputs are set by name, so two inputs of one name would leave one unsettable. Reports the
   pair the Python runtime reports: the first later input whose name an earlier one has. */
static int check_unique_inputs(const tvmrt_graph* g) {
  named_arg* sorted = (named_arg*)malloc((g->num_args ? g->num_args : 1) * sizeof(named_arg));
  size_t i, best = SIZE_MAX, first = 0, group = 0;
  if (sorted == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot check arg_nodes");
  for (i = 0; i < g->num_args; ++i) {
    sorted[i].name = g->nodes[g->arg_nodes[i]].name;
    sorted[i].pos = i;
  }
  qsort(sorted, g->num_args, sizeof(named_arg), by_name_then_pos);
  for (i = 0; i < g->num_args; ++i) {
    if (i == 0 || strcmp(sorted[i].name, sorted[group].name) != 0) {
      group = i;
    } else if (g->arg_nodes[sorted[i].pos] != g->arg_nodes[sorted[group].pos] &&
               (best == SIZE_MAX || sorted[i].pos < best)) {
      best = sorted[i].pos;
      first = sorted[group].pos;
    }
  }
  free(sorted);
  if (best == SIZE_MAX) return 0;
  return tvmrt_fail("GraphFormatError",
                    "graph JSON: arg_nodes: inputs %u and %u are both named '%.200s'; input names "
                    "must be unique (only one of them could be set)",
                    g->arg_nodes[first], g->arg_nodes[best], g->nodes[g->arg_nodes[best]].name);
}

/* A null node arg_nodes leaves out is memory nothing can set: every run reads garbage. */
static int check_null_nodes_listed(const tvmrt_graph* g) {
  unsigned char* listed = (unsigned char*)calloc(g->num_nodes ? g->num_nodes : 1, 1);
  size_t i;
  if (listed == NULL) return tvmrt_fail("DeviceOutOfMemoryError", "cannot check arg_nodes");
  for (i = 0; i < g->num_args; ++i) listed[g->arg_nodes[i]] = 1;
  for (i = 0; i < g->num_nodes; ++i) {
    if (!g->nodes[i].is_op && !listed[i]) break;
  }
  free(listed);
  if (i == g->num_nodes) return 0;
  return tvmrt_fail("GraphFormatError",
                    "graph JSON: arg_nodes: node %zu ('%.200s') is an input or param (op \"null\") "
                    "but arg_nodes does not list it, so nothing could set it",
                    i, g->nodes[i].name);
}

/* every index the executor follows is in range; sets num_entries */
/* a reference to output `index` of node `nid`, usable where only nodes below `limit` are */
static int check_ref(const tvmrt_graph* g, tvmrt_entry_ref r, size_t limit, const char* where) {
  if (r.nid >= limit) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: refers to node %u, but only nodes 0..%lld can be used here",
                      where, r.nid, (long long)limit - 1);
  }
  if (r.index >= g->nodes[r.nid].num_outputs) {
    return tvmrt_fail("GraphFormatError",
                      "graph JSON: %s: refers to output %u of node %u ('%.200s'), which has %u "
                      "output(s)",
                      where, r.index, r.nid, g->nodes[r.nid].name, g->nodes[r.nid].num_outputs);
  }
  return 0;
}

int tvmrt_graph_check_refs(tvmrt_graph* g) {
  size_t nid, i;
  char where[300];
  if (g->row_ptr[0] != 0) {
    return tvmrt_fail("GraphFormatError", "graph JSON: node_row_ptr[0]: must be 0");
  }
  for (nid = 0; nid < g->num_nodes; ++nid) {
    uint64_t want = (uint64_t)g->row_ptr[nid] + g->nodes[nid].num_outputs;
    if (g->row_ptr[nid + 1] != want) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: node_row_ptr[%zu]: is %u but node %zu ('%.200s') has %u "
                        "outputs, so it must be %llu",
                        nid + 1, g->row_ptr[nid + 1], nid, g->nodes[nid].name,
                        g->nodes[nid].num_outputs, (unsigned long long)want);
    }
  }
  for (nid = 0; nid < g->num_nodes; ++nid) { /* nodes run in order: inputs come from earlier */
    for (i = 0; i < g->nodes[nid].num_inputs; ++i) {
      snprintf(where, sizeof(where), "nodes[%zu] ('%.200s') inputs[%zu]", nid, g->nodes[nid].name,
               i);
      if (check_ref(g, g->nodes[nid].inputs[i], nid, where) != 0) return -1;
    }
  }
  g->num_entries = g->row_ptr[g->num_nodes];
  for (i = 0; i < g->num_args; ++i) {
    uint32_t a = g->arg_nodes[i];
    if (a >= g->num_nodes) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: arg_nodes[%zu]: node %u does not exist (%zu nodes)", i, a,
                        g->num_nodes);
    }
    if (g->nodes[a].is_op) {
      return tvmrt_fail("GraphFormatError",
                        "graph JSON: arg_nodes[%zu]: node %u ('%.200s') is not a null node", i, a,
                        g->nodes[a].name);
    }
  }
  if (check_unique_inputs(g) != 0 || check_null_nodes_listed(g) != 0) return -1;
  for (i = 0; i < g->num_heads; ++i) {
    snprintf(where, sizeof(where), "heads[%zu]", i);
    if (check_ref(g, g->heads[i], g->num_nodes, where) != 0) return -1;
  }
  return 0;
}

int tvmrt_graph_check_plan(const tvmrt_graph* g) {
  if (check_input_pools(g) != 0) return -1;
  return check_lifetimes(g);
}
