/*
 * DLR's weight list: prints GetDLRNumWeights, then GetDLRWeightName(i) for every i, one per line,
 * of the model folder argv[1]. tests/native/test_dlr_weight_order.py compares them with DLR
 * 1.10's own test expectations and with tvmrt.dlr's DLRModel.weight_names.
 */
#include <dlr.h>
#include <stdio.h>

int main(int argc, char** argv) {
  DLRModelHandle model = NULL;
  int n = 0, i;
  const char* name = NULL;
  if (argc != 2) return 2;
  if (CreateDLRModel(&model, argv[1], 1, 0) != 0 || GetDLRNumWeights(&model, &n) != 0) {
    fprintf(stderr, "%s\n", DLRGetLastError());
    return 1;
  }
  printf("%d\n", n);
  for (i = 0; i < n; ++i) {
    if (GetDLRWeightName(&model, i, &name) != 0) {
      fprintf(stderr, "%s\n", DLRGetLastError());
      return 1;
    }
    printf("%s\n", name);
  }
  DeleteDLRModel(&model);
  return 0;
}
