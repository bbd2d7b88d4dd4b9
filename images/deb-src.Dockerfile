# A fragment, not a Dockerfile: the start of a RUN that writes a deb-src line for every deb line of the base's own
# apt sources (one-line or deb822 format), so source packages come from wherever the base's packages come from and
# no host is named here. A recipe's line `# include: images/deb-src.Dockerfile` stands for the lines below (without
# these comments), and the recipe's own lines go on with the same RUN (matrix/build.py, `read_recipe`).
RUN set -eu; \
    if [ -f /etc/apt/sources.list ]; then \
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/mcplab-src.list; \
    fi; \
    for f in /etc/apt/sources.list.d/*.sources; do \
        [ -f "$f" ] || continue; \
        sed 's/^Types:.*/Types: deb-src/' "$f" > "/etc/apt/sources.list.d/mcplab-src-${f##*/}"; \
    done; \
