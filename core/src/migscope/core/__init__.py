"""The pure core of migscope: MIG catalogue, layouts, mig-parted configs. No I/O here."""
