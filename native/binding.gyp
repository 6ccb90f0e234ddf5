{
  "targets": [
    {
      "target_name": "backendfs_native",
      "sources": ["src/backendfs_native.c", "src/attr_mirror.c", "src/kept_opens.c", "src/dir_names.c", "src/made_files.c"],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Werror"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
