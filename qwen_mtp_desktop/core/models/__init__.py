"""Models on disk and on the hub: the library, model folders, the Discover catalog, export.

`library` lists the models folder; `folders` checks a model folder's health; `ir` reads
OpenVINO IR files; `catalog` is Discover's curated list; `export` builds and downloads models
(optimum-intel in a child process, ready OpenVINO downloads, the MTP head graft, OVMS);
`data_folders` is changing the models folder."""
