{
  "targets": [
    {
      "target_name": "backendfs_native",
      "sources": ["src/backendfs_native.c", "src/attr_mirror.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
