"""Ready OpenVINO models from the hub, with no export toolkit: the app's own hub client
(`hub_client`), downloading a ready export into the library (`download`: resumable, checked
against the hub's checksums), and adding the MTP head an export lacks (`mtp_graft`) from just the
checkpoint's `mtp.*` tensors (`tensor_source`: bounded range reads, local or on the hub)."""
