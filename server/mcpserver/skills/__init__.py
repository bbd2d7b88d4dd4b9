"""The Skills extension (io.modelcontextprotocol/skills, SEP-2640): directories holding a SKILL.md, served as
skill:// resources with a manifest of every file's digest and size. Nothing imports this wing until a server is
given skills (Server.skills, --skills, a manifest's "skills").

  _frontmatter  a SKILL.md's YAML frontmatter, read as PyYAML reads it, in the subset skills are written in
  _catalog      the skills under directories: found, checked, digested, registered as resources, refreshed
  _methods      skills/list, skills/get and resources/directory/read
"""

from . import _methods
from ._catalog import MAX_SKILL_BYTES, MAX_SKILL_FILES, Catalog, Skill

__all__ = ["MAX_SKILL_BYTES", "MAX_SKILL_FILES", "Catalog", "Skill", "_methods"]
