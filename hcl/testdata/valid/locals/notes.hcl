this is not a wdc file and is ignored {
