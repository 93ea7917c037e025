__version__ = "0.1.0"

# help(), ? and IDEs show each parameter: every module's docstrings get a Parameters section made from its docments
from .utils import install_parameter_docs as _install_parameter_docs
_install_parameter_docs(__name__)
