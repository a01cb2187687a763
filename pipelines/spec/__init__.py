"""What a release is asked to be: pipeline specs (``catalogue``), where things are (``settings``) and partition keys (``partitions``). The lowest floor: it imports no other room."""
