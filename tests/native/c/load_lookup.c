/*
 * Libraries loaded by the C runtime, their imports and lookups through them.
 *
 *   load_lookup lookup LIBRARY NAME  look NAME up through the imports: prints "found",
 *                                    "missing" or "error: <TVMGetLastError>" (exit 1)
 *   load_lookup cycle A B C          import A -> B, B -> C, then C -> A: prints what the last
 *                                    import answered ("imported" or "error: ...")
 */
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/c_runtime_api.h>

static int lookup(const char* path, const char* name) {
  TVMModuleHandle mod = NULL;
  TVMFunctionHandle f = NULL;
  if (TVMModLoadFromFile(path, "so", &mod) != 0 || TVMModGetFunction(mod, name, 1, &f) != 0) {
    printf("error: %s\n", TVMGetLastError());
    return 1;
  }
  puts(f != NULL ? "found" : "missing");
  if (f != NULL) TVMFuncFree(f);
  TVMModFree(mod);
  return 0;
}

static int cycle(char** paths) {
  TVMModuleHandle m[3] = {NULL, NULL, NULL};
  int i, rc;
  for (i = 0; i < 3; ++i) {
    if (TVMModLoadFromFile(paths[i], "so", &m[i]) != 0) {
      printf("error: %s\n", TVMGetLastError());
      return 1;
    }
  }
  if (TVMModImport(m[0], m[1]) != 0 || TVMModImport(m[1], m[2]) != 0) {
    printf("error: %s\n", TVMGetLastError());
    return 1;
  }
  rc = TVMModImport(m[2], m[0]);
  if (rc == 0) puts("imported");
  else printf("error: %s\n", TVMGetLastError());
  for (i = 0; i < 3; ++i) TVMModFree(m[i]);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "lookup") == 0) return lookup(argv[2], argv[3]);
  if (argc == 5 && strcmp(argv[1], "cycle") == 0) return cycle(argv + 2);
  fprintf(stderr, "usage: load_lookup lookup LIBRARY NAME | load_lookup cycle A B C\n");
  return 2;
}
